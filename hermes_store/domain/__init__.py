"""Pure helpers with no I/O: value encodings, titles, argument validation, text cleaning, paths."""
