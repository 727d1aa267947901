"""Raw text -> clean documents: HTML extraction, normalisation, noise filters, sentence splitting, segmentation."""
