r"""Knowledge graphs in: reading files and PyG objects into one layout,
degree-type sets, the prepared typed graph."""
