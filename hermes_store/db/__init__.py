"""The database layer: engines, URLs, server options, the execution seam, error translation
and the per-dialect ``backends``."""
