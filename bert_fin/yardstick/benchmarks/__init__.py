"""Public benchmarks as their downloads lay them out, read for the yardstick (--task ...,
format=cfleb | clue): each reader checks every row (a bad one: one line naming file, row and
field) and converts the folder into what run_classifier / run_squad read.

  rows       the files (a JSON list, or one JSON object a line), bounded, and the row errors;
  halves     the seeded, stratified half split of a labelled eval file into dev and test;
  cfleb      BBT-CFLEB / FinCUGE: finfe, finnl, finre, finnsp, finese;
  clue       CLUE classification: TNEWS / IFLYTEK, AFQMC / OCNLI / CMNLI;
  convert    a --task spec of those formats -> the converted folder and the yardstick's TaskSpec.
"""
