// Package leader elects one syncmedic replica with a coordination.k8s.io Lease (client-go leaderelection): every
// replica evaluates, only the leader remediates and notifies.
package leader
