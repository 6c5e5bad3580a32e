"""Validates rendered Kubernetes objects offline, for test/deploy/manifests.test.ts.

stdin: {"<overlay>": [object, ...], ...} (what `kubectl kustomize` rendered, as JSON).
stdout: {"<overlay>": {"validated": N, "kinds": {"<apiVersion> <kind>": N}, "errors": ["..."]}}.

Built-in kinds go to kubernetes-validate's strict schemas for the Kubernetes version given (unknown
fields are errors, as in kubectl's default server-side field validation); custom resources to the
JSON schemas vendored in the schemas directory (deploy/schemas/index.json says which). An object
that neither knows is an error, never a silent pass.
"""
import argparse
import json
import os
import sys

import jsonschema
import kubernetes_validate


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument('--schemas', required=True, help='directory with index.json and the CRD schemas')
    parser.add_argument('--kubernetes', required=True, help='Kubernetes version, e.g. 1.33.0')
    args = parser.parse_args()

    crds = {}
    with open(os.path.join(args.schemas, 'index.json')) as f:
        for entry in json.load(f):
            with open(os.path.join(args.schemas, entry['file'])) as s:
                schema = json.load(s)
            crds[(entry['apiVersion'], entry['kind'])] = jsonschema.Draft202012Validator(schema)

    out = {}
    for overlay, objects in json.load(sys.stdin).items():
        kinds, errors = {}, []
        for obj in objects:
            key = (obj.get('apiVersion', ''), obj.get('kind', ''))
            name = '%s %s/%s' % (key[0], key[1], obj.get('metadata', {}).get('name', '?'))
            if key in crds:
                problems = ['%s: %s at /%s' % (name, e.message, '/'.join(map(str, e.absolute_path)))
                            for e in crds[key].iter_errors(obj)]
            else:
                try:
                    kubernetes_validate.validate(obj, args.kubernetes, strict=True)
                    problems = []
                except kubernetes_validate.ValidationError as e:
                    problems = ['%s: %s at /%s' % (name, e.message, '/'.join(map(str, e.absolute_path)))]
                except kubernetes_validate.SchemaNotFoundError as e:
                    problems = ['%s: %s' % (name, e.message)]
            errors.extend(problems)
            if not problems:
                kinds['%s %s' % key] = kinds.get('%s %s' % key, 0) + 1
        out[overlay] = {'validated': sum(kinds.values()), 'kinds': kinds, 'errors': errors}
    json.dump(out, sys.stdout)


if __name__ == '__main__':
    main()
