package apiserver

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	serverstorage "k8s.io/apiserver/pkg/server/storage"
	"k8s.io/apiserver/pkg/storage/storagebackend"

	"portal.dev/portal/apiserver/scheme"
	"portal.dev/portal/internal/objintern"
)

// storageFactory stores every resource under /registry/<group>/<resource>,
// encoded as protobuf of its served version (as kube-apiserver does).
// Objects decoded from etcd share their repeating metadata through one
// table for every resource (see objintern).
type storageFactory struct {
	base   storagebackend.Config
	intern objintern.Table
}

func (f *storageFactory) NewConfig(gr schema.GroupResource, example runtime.Object) (*storagebackend.ConfigForResource, error) {
	kinds, _, err := scheme.Scheme.ObjectKinds(example)
	if err != nil {
		return nil, err
	}
	var gv schema.GroupVersion
	for _, k := range kinds {
		if k.Version != runtime.APIVersionInternal {
			gv = k.GroupVersion()
		}
	}
	if gv.Empty() && gr.Group != "" || gv.Version == "" {
		return nil, fmt.Errorf("no served version for %s", gr)
	}
	cfg := f.base
	codec, versioner, err := serverstorage.NewStorageCodec(serverstorage.StorageCodecConfig{
		StorageMediaType:  runtime.ContentTypeProtobuf,
		StorageSerializer: scheme.Codecs,
		StorageVersion:    gv,
		MemoryVersion:     schema.GroupVersion{Group: gv.Group, Version: runtime.APIVersionInternal},
		Config:            cfg,
	})
	if err != nil {
		return nil, fmt.Errorf("storage codec for %s: %w", gr, err)
	}
	cfg.Codec, cfg.EncodeVersioner = objintern.Codec{Codec: codec, Table: &f.intern}, versioner
	return cfg.ForResource(gr), nil
}

func (f *storageFactory) ResourcePrefix(gr schema.GroupResource) string {
	if gr.Group == "" {
		return gr.Resource
	}
	return gr.Group + "/" + gr.Resource
}

func (f *storageFactory) Configs() []storagebackend.Config { return serverstorage.Configs(f.base) }

func (f *storageFactory) Backends() []serverstorage.Backend { return serverstorage.Backends(f.base) }
