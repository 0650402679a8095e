"""What a condition starts from: task folders, collected trajectories, the assembled context,
the study's size rules and the token meter."""
