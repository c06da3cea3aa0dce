package eval

import (
	"github.com/aidgen/aid/runtime/eval/dataset"
	"github.com/aidgen/aid/runtime/kind"
)

// The dataset format lives in package dataset, which imports neither the
// gateway nor the statistics, so that the fake provider's answer key reads
// it without linking the eval; these names are the eval's spelling of it.
type (
	// Case is dataset.Case: one evaluation case.
	Case = dataset.Case
	// Dataset is dataset.Dataset: a named, versioned list of cases.
	Dataset = dataset.Dataset
	// Position is dataset.Position: a place in a dataset or baseline file.
	Position = dataset.Position
	// DatasetError is dataset.Error: one problem in a dataset file.
	DatasetError = dataset.Error
	// DatasetErrorList is dataset.ErrorList: every problem in one dataset
	// file.
	DatasetErrorList = dataset.ErrorList
	// Approvals is dataset.Approvals: how an eval decides the calls that
	// pause a sample's run.
	Approvals = dataset.Approvals
	// ToolAnswer is dataset.ToolAnswer: one answer a case gives a call of a
	// tool.
	ToolAnswer = dataset.ToolAnswer
)

// The approval policies of an eval (dataset.Approvals).
const (
	ApprovalsNone    = dataset.ApprovalsNone
	ApprovalsApprove = dataset.ApprovalsApprove
	ApprovalsReject  = dataset.ApprovalsReject
)

// NewDataset is dataset.New.
func NewDataset(name, version string, cases []Case) (*Dataset, error) {
	return dataset.New(name, version, cases)
}

// LoadDataset is dataset.Load.
func LoadDataset(path string) (*Dataset, error) { return dataset.Load(path) }

// ReadDataset is dataset.Read.
func ReadDataset(files kind.Files, name string) (*Dataset, error) { return dataset.Read(files, name) }

// ParseDatasetJSON is dataset.ParseJSON.
func ParseDatasetJSON(filename string, data []byte) (*Dataset, error) {
	return dataset.ParseJSON(filename, data)
}

// ParseDatasetJSONL is dataset.ParseJSONL.
func ParseDatasetJSONL(filename string, data []byte) (*Dataset, error) {
	return dataset.ParseJSONL(filename, data)
}
