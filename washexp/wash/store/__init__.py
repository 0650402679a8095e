"""Memory stores and growth feeds as files, and the transaction that changes a store whole or not at all."""
