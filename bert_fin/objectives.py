"""The pretraining objectives, one list for the data tool, the model heads and the FLOP count.

  bert     masked LM + next sentence prediction (google's [CLS] A [SEP] B [SEP] pairs)
  roberta  masked LM only, on contiguous full sentences ([CLS] X [SEP], no NSP head)
"""
BERT, ROBERTA = "bert", "roberta"
OBJECTIVES = (BERT, ROBERTA)
