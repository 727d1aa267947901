"""THE training data stream of a run: epochs, order, position, skip on resume, a growing corpus, and
the record of what was read (output_dir/data_order.json). The one owner of the data order.

Order: pure functions of (seed, epoch, file list, workers).
  An *epoch* is a file list, fixed when the epoch is recorded, with each file's record count.
  file_order(n, seed, e)        seeded permutation of the epoch's files (the same on every rank);
  worker_pieces(...)            a worker's share as pieces (path, first, end) of record ranges:
                                sharding "files" (tf.data): whole files perm[w::W] (files % W == 0);
                                sharding "records" (DALI): the records [N*w//W, N*(w+1)//W) of the
                                permuted concatenation, as pieces of files;
  shuffle_seed(seed, e, w)      the seed of tf.data's record shuffle buffer for (epoch, worker);
  piece_permutations(...)       DALI's seeded order of each piece's records.
A worker's stream is the concatenation of its epochs' records; batches run on across epochs.

Position: micro-batches consumed, the int64 variable `data_position/micro_batches` of every
checkpoint (one integer, equal on every rank: each session.run is one micro-batch everywhere).
Worker w has read (position - start_position) * batch_size records of its stream since the order
began; `DataOrder.locate` turns that into (epoch, records of it already read). A reader resumes by
rebuilding the stream and skipping those records; no iterator or shuffle state is saved. Dropout
masks are stateless in (seed, rank, position), so a restarted process redraws them.

data_order.json (rank 0 writes it atomically; kilobytes): the seed, the layout it was made for
(workers, per-worker batch size, sharding), the --input_file it came from, the position its epoch 0
starts at (0, or the step where --data_order=restart began it) and every recorded epoch's absolute
file paths and record counts. Resuming checks the files given now against it (`resume_order`).
The run's order is one type, mixture.MixedOrder, whatever the flag: --input_file is its one source
(in records, read exactly as the micro-batch arithmetic above reads it), --input_source a weighted
mixture of several (below); readers get its view, a MixtureStream of one WorkerStream a source.

Growing corpus: after every update each rank checks whether the recorded epochs end less than one
update ahead of the position (the same answer everywhere); then rank 0 records the next epoch from
the --input_file glob as it is at that moment (files new to the run checked first, by the run's
check), writes the JSON and broadcasts it. A new file joins at an epoch boundary, never inside one.

Readers (input/tfdata.py, input/dali.py) get a WorkerStream: an immutable view of the order for one
worker from one position, reading the last recorded file list again for later epochs. While the
recorded epochs are what the view assumed, one training call runs to the end. When a new epoch's
files differ (the corpus changed), the StreamHook stops where that epoch begins and the caller
starts a new call with a new view. DALI's view covers a bounded number of records (its order is
written out as index files): the hook stops at its end too.

Per-record work keyed on (seed, epoch, record) has one place: WorkerStream.epoch_pieces gives, for
every epoch, the records of this worker in reading order. A record's identity in an epoch is its
index in the epoch's file list in glob order (identity_offsets: the records of the files before
its file, + its index inside the file): the same for any number of workers, sharding and shuffle.
Readers attach (epoch, identity) to each record before shuffling; dynamic masking
(input/dynamic_masking.py) draws a record's masks from (seed, epoch, identity).

Mixtures (--input_source=NAME=GLOB:WEIGHT, repeated; mixture.py): each source is an order of its
own counted in records (its own epochs, seed, growing files), and a seeded stratified schedule,
the same on every worker, says which source each example of a worker's stream comes from; a
source's position is what the schedule has taken of it up to the run's position. data_order.json
then holds the layout, seed and start, and per source its name, glob, weight, seed and epochs
(one --input_file: the shape above).

Modules: order.py (the pure arithmetic above: DataOrder, WorkerStream, a worker's pieces),
mixture.py (the run's order over its sources: Schedule, MixedOrder, MixtureStream), resume.py
(data_order.json, resume_order, record_ahead, checkpoint_position), sync.py
(DataStream: rank 0 records and broadcasts; input files and counts; the position in the graph).
Callers use the names below, from `bert_fin.input import stream`.
"""
from bert_fin.input.stream.order import (  # pylint: disable=unused-import
    POSITION_VARIABLE, SHARDING_OF_PIPELINE, DataOrder, Epoch, Piece, WorkerStream,
    check_files_divisible, file_order, identity_offsets, piece_permutations, shuffle_seed,
    worker_pieces)
from bert_fin.input.stream.mixture import (  # pylint: disable=unused-import
    MAX_SOURCES, MAX_WEIGHT_RATIO, MixedOrder, MixtureStream, Schedule, Source, flag_of,
    input_file_source, order_from_json)
from bert_fin.input.stream.resume import (  # pylint: disable=unused-import
    ORDER_FILE, StreamError, archive_order, checkpoint_position, load_order, record_ahead,
    record_epochs, resume_order, save_order)
from bert_fin.input.stream.sync import (  # pylint: disable=unused-import
    DALI_VIEW_RECORDS, POSITION_AFTER, DataStream, advance_after, dropout_seed,
    expand_input_files, position_variable, record_count)
