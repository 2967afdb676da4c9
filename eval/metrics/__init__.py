"""One module per metric; ``base`` holds the shape they share (sacrebleu's: an object
built with its settings, ``corpus_score`` and a signature derived from those settings)."""
