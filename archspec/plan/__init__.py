"""`archspec plan`: how long a training step or a generated token takes on named hardware.

hardware.py loads the catalogue (systems.yaml); opcost.py turns the IR's lowered ops into
per-op FLOPs, bytes and matmul shapes once; efficiency.py says what fraction of a peak a kernel
reaches; collectives.py times NCCL-style collectives on the right link; step.py puts them
together for one training layout; fit.py evaluates count's memory model fast enough to search;
search.py enumerates layouts; serve.py predicts prefill and decode; validation.py holds the
published runs the model is checked against.
"""
