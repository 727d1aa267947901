"""run_distill: a smaller student learns a fine-tuned run_classifier teacher's soft targets."""
