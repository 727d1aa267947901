"""create_pretraining_data: documents -> training instances -> records (faithful and fast modes)."""
