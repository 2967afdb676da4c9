"""Trimming a model's vocabulary to the languages it serves (``livetrans trim-vocab``)."""
