"""Fine-tuning: sentence / sentence-pair classification on a pretrained checkpoint (run_classifier.py)."""
