package pgledger

import "testing"

// TestSchemaVersionCountsSteps keeps the exported version and the steps in
// step: a new step without a new version would never be applied.
func TestSchemaVersionCountsSteps(t *testing.T) {
	if SchemaVersion != len(migrationSteps) {
		t.Fatalf("SchemaVersion is %d but there are %d migration steps", SchemaVersion, len(migrationSteps))
	}
}
