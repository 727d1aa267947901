"""bert_fin/mpi.py as one process sees it (no mpirun): a world of one, settle()'s error contract,
spread() of files over ranks; data/multihost/parts.py's part files (whole or an error, never bad records);
data/multihost/create_ranks.py's segment plan. The tools under mpirun: test_data_tools_mpi.py."""
import pytest

from bert_fin import mpi
from bert_fin.data import shuffle
from bert_fin.data.multihost import create_ranks
from bert_fin.data.multihost import parts


def test_a_plain_process_is_a_world_of_one():
  assert not mpi.launched_by_mpirun({"PATH": "/bin"})
  assert mpi.launched_by_mpirun({"OMPI_COMM_WORLD_SIZE": "2"})
  world = mpi.World()
  assert (world.rank, world.size, world.is_root, world.distributed) == (0, 1, True, False)
  assert world.allgather(3) == [3] and world.gather(3) == [3] and world.bcast(3) == 3
  assert list(world.share(10)) == list(range(10))
  world.check_same("files", ["a", 1])


def test_settle_turns_a_rank_error_into_the_exit_status():
  world = mpi.World()
  assert world.settle("step", lambda: 7) == 7
  with pytest.raises(mpi.RankError) as user:
    world.settle("step", lambda: int("x"))
  assert user.value.status == 2 and "invalid literal" in str(user.value)

  def bug():
    raise KeyError("k")

  with pytest.raises(mpi.RankError) as unexpected:
    world.settle("step", bug)
  assert unexpected.value.status == 1 and "KeyError" in str(unexpected.value)


class _Rank(mpi.World):
  def __init__(self, rank, size):  # pylint: disable=super-init-not-called
    self.comm, self.rank, self.size = None, rank, size


def test_spread_deals_every_file_once_biggest_first():
  sizes = [5, 100, 7, 60, 60, 1]
  shares = [_Rank(r, 3).spread(sizes) for r in range(3)]
  assert sorted(i for share in shares for i in share) == list(range(6))
  assert shares == [[1], [2, 3], [0, 4, 5]]  # 100 | 60 + 7 | 60 + 5 + 1
  ranges = [list(_Rank(r, 3).share(8)) for r in range(3)]
  assert ranges == [[0, 1], [2, 3, 4], [5, 6, 7]]


def test_segments_are_whole_blocks_covering_every_document():
  bounds = create_ranks.segment_bounds(1000, 7, 2)
  assert bounds[0][0] == 0 and bounds[-1][1] == 1000
  assert all(a[1] == b[0] for a, b in zip(bounds, bounds[1:]))
  assert all(begin % 7 == 0 for begin, _ in bounds) and len(bounds) >= 2 * 8
  assert len(create_ranks.segment_bounds(10 ** 7, 256, 2)) * create_ranks.MAX_SEGMENT_DOCUMENTS >= 10 ** 7


def test_parts_are_whole_or_an_error(tmp_path):
  records = [b"a" * 5, b"bb", b"c" * 300]
  path = str(tmp_path / "p.part")
  with parts.PartWriter(path) as part:
    part.add(*shuffle.pack_records(records[:2]))
    part.add(*shuffle.pack_records(records[2:]))
    part.info = {"stats": {"n": 3}}
  blob, lengths, info = parts.read_part(path)
  assert shuffle.unpack_records(blob, lengths) == records and info == {"stats": {"n": 3}}
  assert parts.read_info(path) == info and parts.is_whole(path)
  data = bytearray(open(path, "rb").read())
  data[3] ^= 1
  open(path, "wb").write(bytes(data))
  with pytest.raises(parts.PartError, match="checksum"):
    parts.read_part(path)
  open(path, "wb").write(bytes(data[:-5]))
  assert not parts.is_whole(path)
  with pytest.raises(parts.PartError, match="missing"):
    parts.read_part(str(tmp_path / "none.part"))
  with pytest.raises(ZeroDivisionError):  # a failed part never appears under its name
    with parts.PartWriter(str(tmp_path / "failed.part")) as part:
      part.add(*shuffle.pack_records(records))
      raise ZeroDivisionError
  assert not (tmp_path / "failed.part").exists()


def test_a_part_streams_in_chunks_and_a_damaged_one_fails_at_the_end(tmp_path):
  records = [bytes([i]) * (i + 1) for i in range(50)]
  path = str(tmp_path / "p.part")
  with parts.PartWriter(path) as part:
    part.add(*shuffle.pack_records(records))
    part.info = {}
  chunks = list(parts.iter_part(path, records_at_a_time=7))
  assert len(chunks) == 8
  assert [r for blob, lengths in chunks for r in shuffle.unpack_records(blob, lengths)] == records
  data = bytearray(open(path, "rb").read())
  data[100] ^= 1
  open(path, "wb").write(bytes(data))
  with pytest.raises(parts.PartError, match="checksum"):
    list(parts.iter_part(path, records_at_a_time=7))
