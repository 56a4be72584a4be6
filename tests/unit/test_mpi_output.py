"""`mpirun --tag-output` comes back as whole lines per rank however the ranks' writes arrive."""

from kfdist.components.train_distributed.local.mpi_output import rank_lines


def _read(stream):
    return list(rank_lines(stream.splitlines(keepends=True)))


def test_whole_lines_keep_their_rank():
    assert _read("[1,0]<stdout>:a\n[1,1]<stderr>:b\n") == [(0, "a"), (1, "b")]


def test_a_line_split_from_its_newline_ends_at_the_ranks_own_newline():
    # Open MPI 4.1's bytes when an unbuffered print writes the text, then the newline.
    assert _read("[1,1]<stdout>:rank 1 line 2[1,1]<stdout>:\n") == [(1, "rank 1 line 2")]


def test_another_ranks_chunk_in_the_middle_of_a_line_is_not_glued_to_it():
    stream = ("[1,0]<stdout>:rank 0 of 2 sum 3.0[1,1]<stdout>:rank 1 of 2 sum 3.0\n"
              "[1,0]<stdout>:\n")
    assert _read(stream) == [(1, "rank 1 of 2 sum 3.0"), (0, "rank 0 of 2 sum 3.0")]


def test_mpiruns_own_lines_and_an_unfinished_chunk_are_kept():
    stream = "mpirun noticed that process rank 1 exited\n[1,0]<stdout>:last words"
    assert _read(stream) == [(None, "mpirun noticed that process rank 1 exited"),
                             (0, "last words")]


def test_an_empty_line_a_rank_prints_stays_an_empty_line():
    assert _read("[1,0]<stdout>:\n[1,0]<stdout>:x\n") == [(0, ""), (0, "x")]
