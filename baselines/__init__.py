"""Hand-coded policies (PowerTrip and others) and the evaluation harness."""
