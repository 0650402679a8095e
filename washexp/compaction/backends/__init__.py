"""Who plays a role: the offline reference, a served OpenAI-compatible model, a local llama.cpp
server; how a role's reply is read and what structured output it asks for."""
