"""What nnrt keeps on disk or shares between sessions: session files
(offline models), the model cache, checksums, atomic writes and the
process-wide weight store."""
