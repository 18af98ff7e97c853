"""TGT-text: the Task Graph Transformer on step-name embeddings (needs the ``text`` extra)."""
