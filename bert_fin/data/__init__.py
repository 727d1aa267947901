"""Documents -> masked instances -> TFRecords."""
