"""create_pretraining_data under mpirun: create_ranks (the ranks' work and rank 0's assembly),
document_index (the input stream's numbering from per-file scans), parts (part files, also used
by packing.pack_ranks)."""
