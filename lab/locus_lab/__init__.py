"""The Locus lab: run programs under Locus and peer allocators, trace their heaps, compare."""
__version__ = "0.2.0"
