export * from './envelope.js';
export * from './body.js';
export * from './wire.js';
export * from './hash-request.js';
export * from './errors.js';
export * from './instant.js';
export * from './raw-uid.js';
export * from './scanned-answers.js';
