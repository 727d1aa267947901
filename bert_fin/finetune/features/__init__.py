"""extract_features.py: a checkpoint's per-token features (google's JSON lines) and sentence
vectors (.npy), streamed over a large input file.

  flags     the settings table of its flags (google's extract_features.py names and defaults,
            then bert_fin's --pooling / --vectors_file / --progress);
  inputs    google's input lines (`text_a` or `text_a ||| text_b`): the checking pass, the
            streamed chunks, the rows ([CLS] A [SEP] (B [SEP]) as google lays them out);
  outputs   google's JSON-lines record, pooled vectors, and the writers (atomic, incremental);
  encoder   the model (BertModel's encoder layers on placeholders) and its checks (TensorFlow);
  extract   the run: checks (the input's before TensorFlow is imported), then chunk by chunk.
"""
