"""The records between data preparation and training: schema (THE feature spec and RecordLayout),
tfrecord_index (TFRecord framing + CRC, reading/verifying, DALI indexes), masking_source (where
training finds the masking config of dynamic-masking records)."""
