"""Fine-tuning: sentence / sentence-pair classification on a pretrained checkpoint (run_classifier.py)
and the yardstick that compares checkpoints by fine-tuning them (tools/compare_checkpoints.py)."""
