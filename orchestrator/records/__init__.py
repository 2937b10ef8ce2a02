"""Records on disk: atomic writes, Feedback publication, run directories."""
