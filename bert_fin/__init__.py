"""bert_fin: Chinese domain BERT pretraining (google-research/bert faithful, TF 1.x Estimator style)."""
