"""The data side of the language-model uses (embeddings, scoring, generation,
infilling): reading texts, and writing what the scripts produce."""
