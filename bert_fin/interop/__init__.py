"""transformers folders into bert_fin: hf_folder.py reads one (no PyTorch; torch_pickle.py for
.bin), hf_import.py writes the google-named checkpoint, init_checkpoint.py lets the programs'
--init_checkpoint take a folder. (The other direction is bert_fin/export/.)"""
