"""Pure renderers: a validated job description in, a TFJob, MPIJob or TrainJob manifest out; no API calls."""
