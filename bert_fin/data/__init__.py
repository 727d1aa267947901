"""Documents -> masked instances -> TFRecords, and packed records from them.

create/     create_pretraining_data: input documents, google's algorithm (faithful) and the fast
            mode, instances, masking, the stats JSON
kernel/     the fast mode's records in C (_kernel*.c/h) and the dispatch to it or to Python
packing/    pack_records: histogram plans, the packing passes, the tool on MPI ranks
multihost/  create_pretraining_data on MPI ranks: the document index, part files
parallel, shuffle, writer: what creation and packing share (process pool, shuffle window and
dealing to files, Example encoding and sharded files).
"""
