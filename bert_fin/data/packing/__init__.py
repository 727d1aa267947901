"""pack_records: several short sequences in one row (plans: histogram plans and packed rows;
pack_files: the tool's passes; pack_ranks: the tool on MPI ranks)."""
