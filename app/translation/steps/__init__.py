"""One translation update as named steps, each a small module with its own tests.

``run_update`` (``app.translation.translator``) used to be one function in which draft
preparation, glossary drafting, retries, loop and framing cuts, term repair, held-back
captions, masking and the draft guard interleaved; it was the hardest place to change
safely. Here each of those is a step that takes what it needs and returns what the next
one reads, and ``app.translation.steps.pipeline.run_steps`` runs them in order:

1. ``draft``: the SSBD draft (previous output or a client's prediction), past the forced
   prefix, masked, with its bias limit and the glossary drafters.
2. ``verify``: one generation that verifies the draft and continues (``generate``).
3. ``verdict``: what is wrong with an output (``diagnose_output``), read by the steps after.
4. ``retry``: a pathological final translated once more with the stronger prompt.
5. ``cut``: a final that still loops or is still framed, cut where that starts.
6. ``repair``: a final that misses glossary terms, decoded again with the terms proposed.
7. ``display``: the caption (framing held back on partials) and display-only mask-k.
8. ``commit``: what the session keeps as the next update's draft (the draft guard).
9. ``append``: the append-only commit policy's step for a segment's committed text.

The prompt of an update is planned by ``prompt`` (context and glossary as data), before the
job. Behaviour is the one the translator always had: same tokens, same retries, same events.
"""
