module github.com/syncmedic/syncmedic/tools/argo-workflows

go 1.23

// Only the module's manifests are used (the Workflow CRD); nothing is built from it.
require github.com/argoproj/argo-workflows/v3 v3.6.2
