package validation

import (
	"encoding/json"
	"reflect"

	corev1 "k8s.io/api/core/v1"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

const immutableWhenSet = "field is immutable when `immutable` is set"

// validateFinalizerName is upstream's namespace finalizer rule: a qualified
// name that, if unprefixed, is one of the standard ones.
func validateFinalizerName(name string, fldPath *field.Path) field.ErrorList {
	errs := apimachineryvalidation.ValidateFinalizerName(name, fldPath)
	return append(errs, validateKubeFinalizerName(name, fldPath)...)
}

// ValidateNamespace validates a new Namespace: a DNS-1123 label name and
// valid spec.finalizers.
func ValidateNamespace(ns *corev1.Namespace) field.ErrorList {
	errs := ValidateObjectMetaFor("Namespace", &ns.ObjectMeta, false)
	// Upstream reports these on spec.finalizers without an index.
	for _, f := range ns.Spec.Finalizers {
		errs = append(errs, validateFinalizerName(string(f), field.NewPath("spec", "finalizers"))...)
	}
	return errs
}

// ValidateNamespaceUpdate validates an update of a Namespace; only metadata
// may change (the registry keeps spec and status).
func ValidateNamespaceUpdate(newNs, oldNs *corev1.Namespace) field.ErrorList {
	return ValidateObjectMetaUpdateFor("Namespace", &newNs.ObjectMeta, &oldNs.ObjectMeta)
}

// ValidateNamespaceStatusUpdate validates a status update: the phase is
// Active unless the namespace is being deleted, then Terminating.
func ValidateNamespaceStatusUpdate(newNs, oldNs *corev1.Namespace) field.ErrorList {
	errs := ValidateObjectMetaUpdateFor("Namespace", &newNs.ObjectMeta, &oldNs.ObjectMeta)
	// Upstream capitalises "Phase" in this path.
	path := field.NewPath("status", "Phase")
	if newNs.DeletionTimestamp.IsZero() {
		if newNs.Status.Phase != corev1.NamespaceActive {
			errs = append(errs, field.Invalid(path, newNs.Status.Phase, "may only be 'Active' if `deletionTimestamp` is empty"))
		}
	} else if newNs.Status.Phase != corev1.NamespaceTerminating {
		errs = append(errs, field.Invalid(path, newNs.Status.Phase, "may only be 'Terminating' if `deletionTimestamp` is not empty"))
	}
	return errs
}

// ValidateNamespaceFinalizeUpdate validates an update through the finalize
// subresource.
func ValidateNamespaceFinalizeUpdate(newNs, oldNs *corev1.Namespace) field.ErrorList {
	errs := ValidateObjectMetaUpdateFor("Namespace", &newNs.ObjectMeta, &oldNs.ObjectMeta)
	path := field.NewPath("spec", "finalizers")
	for i, f := range newNs.Spec.Finalizers {
		errs = append(errs, validateFinalizerName(string(f), path.Index(i))...)
	}
	return errs
}

// ValidateConfigMap validates a ConfigMap: keys are valid config keys, no
// key is in both data and binaryData, and all values total at most 1 MiB.
func ValidateConfigMap(cm *corev1.ConfigMap) field.ErrorList {
	errs := ValidateObjectMetaFor("ConfigMap", &cm.ObjectMeta, true)
	total := 0
	for key, value := range cm.Data {
		path := field.NewPath("data").Key(key)
		errs = append(errs, msgsToErrs(path, key, utilvalidation.IsConfigMapKey(key))...)
		if _, dup := cm.BinaryData[key]; dup {
			errs = append(errs, field.Invalid(path, key, "duplicate of key present in binaryData"))
		}
		total += len(value)
	}
	for key, value := range cm.BinaryData {
		errs = append(errs, msgsToErrs(field.NewPath("binaryData").Key(key), key, utilvalidation.IsConfigMapKey(key))...)
		total += len(value)
	}
	if total > corev1.MaxSecretSize {
		// The empty path means the whole object.
		errs = append(errs, field.TooLong(field.NewPath(""), "", corev1.MaxSecretSize))
	}
	return errs
}

// ValidateConfigMapUpdate validates an update of a ConfigMap; an immutable
// one keeps its data.
func ValidateConfigMapUpdate(newCM, oldCM *corev1.ConfigMap) field.ErrorList {
	errs := ValidateObjectMetaUpdateFor("ConfigMap", &newCM.ObjectMeta, &oldCM.ObjectMeta)
	if deref(oldCM.Immutable) {
		if !deref(newCM.Immutable) {
			errs = append(errs, field.Forbidden(field.NewPath("immutable"), immutableWhenSet))
		}
		if !reflect.DeepEqual(newCM.Data, oldCM.Data) {
			errs = append(errs, field.Forbidden(field.NewPath("data"), immutableWhenSet))
		}
		if !reflect.DeepEqual(newCM.BinaryData, oldCM.BinaryData) {
			errs = append(errs, field.Forbidden(field.NewPath("binaryData"), immutableWhenSet))
		}
	}
	return append(errs, ValidateConfigMap(newCM)...)
}

// ValidateSecret validates a Secret: keys, total size (1 MiB) and the keys
// each well-known type requires. It expects stringData already merged into
// data (defaults.Secret does so, as upstream's conversion does).
func ValidateSecret(s *corev1.Secret) field.ErrorList {
	errs := ValidateObjectMetaFor("Secret", &s.ObjectMeta, true)
	dataPath := field.NewPath("data")
	total := 0
	for key, value := range s.Data {
		errs = append(errs, msgsToErrs(dataPath.Key(key), key, utilvalidation.IsConfigMapKey(key))...)
		total += len(value)
	}
	if total > corev1.MaxSecretSize {
		errs = append(errs, field.TooLong(dataPath, "", corev1.MaxSecretSize))
	}
	return append(errs, validateSecretType(s, dataPath)...)
}

func validateSecretType(s *corev1.Secret, dataPath *field.Path) field.ErrorList {
	switch s.Type {
	case corev1.SecretTypeServiceAccountToken:
		// The token and uid are filled in later by a controller.
		if s.Annotations[corev1.ServiceAccountNameKey] == "" {
			return field.ErrorList{field.Required(field.NewPath("metadata", "annotations").Key(corev1.ServiceAccountNameKey), "")}
		}
	case corev1.SecretTypeDockercfg:
		return requireJSONKey(s.Data, corev1.DockerConfigKey, dataPath)
	case corev1.SecretTypeDockerConfigJson:
		return requireJSONKey(s.Data, corev1.DockerConfigJsonKey, dataPath)
	case corev1.SecretTypeBasicAuth:
		_, user := s.Data[corev1.BasicAuthUsernameKey]
		_, pass := s.Data[corev1.BasicAuthPasswordKey]
		if !user && !pass {
			return field.ErrorList{
				field.Required(dataPath.Key(corev1.BasicAuthUsernameKey), ""),
				field.Required(dataPath.Key(corev1.BasicAuthPasswordKey), ""),
			}
		}
	case corev1.SecretTypeSSHAuth:
		if len(s.Data[corev1.SSHAuthPrivateKey]) == 0 {
			return field.ErrorList{field.Required(dataPath.Key(corev1.SSHAuthPrivateKey), "")}
		}
	case corev1.SecretTypeTLS:
		var errs field.ErrorList
		for _, key := range []string{corev1.TLSCertKey, corev1.TLSPrivateKeyKey} {
			if _, ok := s.Data[key]; !ok {
				errs = append(errs, field.Required(dataPath.Key(key), ""))
			}
		}
		return errs
	}
	return nil
}

func requireJSONKey(data map[string][]byte, key string, dataPath *field.Path) field.ErrorList {
	raw, ok := data[key]
	if !ok {
		return field.ErrorList{field.Required(dataPath.Key(key), "")}
	}
	if err := json.Unmarshal(raw, &map[string]any{}); err != nil {
		return field.ErrorList{field.Invalid(dataPath.Key(key), "<secret contents redacted>", err.Error())}
	}
	return nil
}

// ValidateSecretUpdate validates an update of a Secret: its type is fixed
// and an immutable one keeps its data.
func ValidateSecretUpdate(newS, oldS *corev1.Secret) field.ErrorList {
	errs := ValidateObjectMetaUpdateFor("Secret", &newS.ObjectMeta, &oldS.ObjectMeta)
	errs = append(errs, apimachineryvalidation.ValidateImmutableField(newS.Type, oldS.Type, field.NewPath("type"))...)
	if deref(oldS.Immutable) {
		if !deref(newS.Immutable) {
			errs = append(errs, field.Forbidden(field.NewPath("immutable"), immutableWhenSet))
		}
		if !reflect.DeepEqual(newS.Data, oldS.Data) {
			errs = append(errs, field.Forbidden(field.NewPath("data"), immutableWhenSet))
		}
	}
	return append(errs, ValidateSecret(newS)...)
}

// ValidateServiceAccount validates a ServiceAccount (metadata only).
func ValidateServiceAccount(sa *corev1.ServiceAccount) field.ErrorList {
	return ValidateObjectMetaFor("ServiceAccount", &sa.ObjectMeta, true)
}

// ValidateServiceAccountUpdate validates an update of a ServiceAccount.
func ValidateServiceAccountUpdate(newSA, oldSA *corev1.ServiceAccount) field.ErrorList {
	errs := ValidateObjectMetaUpdateFor("ServiceAccount", &newSA.ObjectMeta, &oldSA.ObjectMeta)
	return append(errs, ValidateServiceAccount(newSA)...)
}
