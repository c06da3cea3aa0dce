package eval

import (
	"github.com/aidgen/aid/runtime/eval/dataset"
	"github.com/aidgen/aid/runtime/kind"
)

// The dataset types and readers are package dataset's, so that what reads
// a dataset without evaluating (the fake provider's answer key) need not
// link this package; these names are the ones evals use.
type (
	// Case is dataset.Case.
	Case = dataset.Case
	// Dataset is dataset.Dataset.
	Dataset = dataset.Dataset
	// Position is dataset.Position.
	Position = dataset.Position
	// DatasetError is dataset.DatasetError.
	DatasetError = dataset.DatasetError
	// DatasetErrorList is dataset.DatasetErrorList.
	DatasetErrorList = dataset.DatasetErrorList
	// Approvals is dataset.Approvals.
	Approvals = dataset.Approvals
	// ToolAnswer is dataset.ToolAnswer.
	ToolAnswer = dataset.ToolAnswer
)

// The approval policies of an eval (dataset.Approvals).
const (
	// ApprovalsNone decides nothing: a paused run fails its sample.
	ApprovalsNone = dataset.ApprovalsNone
	// ApprovalsApprove approves every paused call.
	ApprovalsApprove = dataset.ApprovalsApprove
	// ApprovalsReject rejects every paused call.
	ApprovalsReject = dataset.ApprovalsReject
)

// NewDataset is dataset.NewDataset.
func NewDataset(name, version string, cases []Case) (*Dataset, error) {
	return dataset.NewDataset(name, version, cases)
}

// LoadDataset is dataset.LoadDataset.
func LoadDataset(path string) (*Dataset, error) { return dataset.LoadDataset(path) }

// ReadDataset is dataset.ReadDataset.
func ReadDataset(files kind.Files, name string) (*Dataset, error) {
	return dataset.ReadDataset(files, name)
}

// ParseDatasetJSON is dataset.ParseDatasetJSON.
func ParseDatasetJSON(filename string, data []byte) (*Dataset, error) {
	return dataset.ParseDatasetJSON(filename, data)
}

// ParseDatasetJSONL is dataset.ParseDatasetJSONL.
func ParseDatasetJSONL(filename string, data []byte) (*Dataset, error) {
	return dataset.ParseDatasetJSONL(filename, data)
}
