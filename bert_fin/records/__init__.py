"""The records between data preparation and training: schema (THE feature spec and RecordLayout),
tfrecord_index (TFRecord framing + CRC, reading/verifying, DALI indexes), masking_config
(MaskingConfig: the masking of dynamic-masking records, its JSON), masking_source (where
training finds it)."""
