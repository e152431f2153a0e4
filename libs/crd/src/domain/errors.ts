import { Data } from 'effect';

/** A Schema that cannot become a structural CRD schema; `path` is the JSON path of the offending field. */
export class CrdSchemaError extends Data.TaggedError('CrdSchemaError')<{
  readonly path: string;
  readonly reason: string;
}> {
  override get message(): string {
    return `${this.path || '<root>'}: ${this.reason}`;
  }
}

/** A CRD definition that Kubernetes would refuse or that breaks this library's rules (versions, names, columns). */
export class CrdDefinitionError extends Data.TaggedError('CrdDefinitionError')<{
  readonly crd: string;
  readonly reason: string;
}> {
  override get message(): string {
    return `CRD ${this.crd}: ${this.reason}`;
  }
}

/** Reading or writing a manifest file failed. */
export class ManifestIoError extends Data.TaggedError('ManifestIoError')<{
  readonly file: string;
  readonly reason: string;
}> {
  override get message(): string {
    return `${this.file}: ${this.reason}`;
  }
}
