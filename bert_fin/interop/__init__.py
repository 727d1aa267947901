"""transformers folders into bert_fin: hf_folder.py reads one (no PyTorch, no TensorFlow) as
untrusted input (bert_fin/guard/untrusted.py: regular files inside the folder, bounded reads, JSON
depth, the budget config.json justifies), hf_config.py (config.json checked, ceilings), safetensors_file.py,
torch_pickle.py for .bin on pickle_machine.py (a restricted, bounded unpickler); hf_import.py
writes the google-named checkpoint, init_checkpoint.py lets the programs' --init_checkpoint take a
folder; hf_names.py states the google <-> transformers variable names both directions use. (The
other direction is bert_fin/export/.)"""
