/**
 * A tote's temperature sensor and whether its calibration lets it judge a cold chain (docs/api.md,
 * Totes: sensor and calibration; 21 CFR 11.10(a), ISO/IEC 17025 certificates). Pure: the store
 * reads the records, this decides.
 */
export type SensorRecord = {
  serial: string
  model: string
  /** ± °C over the profile's range, from the calibration certificate. */
  accuracy_c: number
  calibrated_at: string
  calibration_due: string
  /** The ISO/IEC 17025 calibration certificate's reference. */
  certificate_ref: string
}

/**
 * What a pharmacy does with a dispatch whose tote is due for calibration: `refuse` (the default)
 * refuses one past its due date; `warn` lets it go with a warning on the delivery and its report;
 * `strict` also refuses a tote whose sensor was never recorded (unknown calibration).
 */
export const calibrationPolicies = ['refuse', 'warn', 'strict'] as const
export type CalibrationPolicy = (typeof calibrationPolicies)[number]

export type SensorWarning = {
  code: 'sensor_calibration_due' | 'sensor_unrecorded'
  message: string
  tote_id: string
  sensor_serial: string | null
  calibration_due: string | null
}

export type CalibrationVerdict = { refuse: false; warning: SensorWarning | null } | { refuse: true; warning: SensorWarning }

/**
 * The verdict on dispatching with `toteId` at `atIso`. A recorded sensor is due once its
 * `calibration_due` is at or before the dispatch. A tote with no sensor record is unknown: a
 * warning under `refuse` and `warn` (totes registered before sensors were recorded keep working),
 * refused under `strict`.
 */
export function calibrationVerdict(
  toteId: string,
  sensor: SensorRecord | null,
  policy: CalibrationPolicy,
  atIso: string,
): CalibrationVerdict {
  if (!sensor) {
    const warning: SensorWarning = {
      code: 'sensor_unrecorded',
      message: `Tote ${toteId} has no sensor record: its calibration is unknown.`,
      tote_id: toteId,
      sensor_serial: null,
      calibration_due: null,
    }
    return policy === 'strict' ? { refuse: true, warning } : { refuse: false, warning }
  }
  if (Date.parse(sensor.calibration_due) > Date.parse(atIso)) return { refuse: false, warning: null }
  const warning: SensorWarning = {
    code: 'sensor_calibration_due',
    message: `The sensor ${sensor.serial} of tote ${toteId} was due for calibration on ${sensor.calibration_due}.`,
    tote_id: toteId,
    sensor_serial: sensor.serial,
    calibration_due: sensor.calibration_due,
  }
  return policy === 'warn' ? { refuse: false, warning } : { refuse: true, warning }
}
