"""The tutorials this project grew from, as gate subjects (docs/tutorials.md).

Each module here re-implements one tutorial's attention module in this
project's own code, behaving as the tutorial's does, bugs included. Its bugs
are named switches: `tutorial` has them all, `corrected` none, and
`only_<bug>` exactly one, so that each bug's law and shrunk case can be shown
on its own. Every variant is driven the same way: the module's projections
are replaced by feeds that hand over the gate's q, k and v (identity
projections), so the kernel is what is judged.
"""
