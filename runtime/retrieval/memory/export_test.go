package memory

// SetParallelMin lowers the size from which a search is split over cores,
// so that tests exercise the split and the merge on small data.
func SetParallelMin(s *Store, floats int) { s.parallelMin = floats }
