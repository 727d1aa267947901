"""A fine-tuned model -> what a service loads (tools/export_serving.py; docs/serving.md): export.py
checks the inputs and writes the export atomically; classifier.py is the servable tf.Module (raw
text and ids signatures), features.py a pretrained encoder's (extract_features' vectors), both on
restored_model.py (bert_fin's own graph, its variables from the checkpoint), graph_tokenizer.py +
char_table.py (google's FullTokenizer in TensorFlow ops) and layout.py ([CLS] A [SEP] (B [SEP]),
long texts cut); deploy_files.py writes TF Serving's and Triton's files; onnx_client.py is copied
into each export (onnxruntime + tokenizers only), beside finetune/token_windows.py, the rules it
reads long texts and windows by."""
