"""Translation: the translator and what it needs (prompts, pathologies, glossary, sessions,
display policies, drafting chains). Imports nothing here: the engine uses two pure helpers."""
