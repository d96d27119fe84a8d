"""The Go clients of the interop suite (see ``go.rokkago``)."""
